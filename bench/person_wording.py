"""What was tried for the person wording of the core-only catalogs (issue 28, h-person), replayable.

Issue 28's bar is recall@5 ≥ 0.75 on the person wording of every catalog (fused, the default
offline configuration); on the tuning catalogs the fusion finds 17, 22, 18 and 25 of 30 (stripe,
twilio, opsgenie, vikunja). Every idea here is general (no API knowledge) and is judged as
``bench/fusion_fit.py`` judges the fusion: the core's constants (``k_core`` × ``sure_core``, plus
the idea's own constant when it has one) refitted by leave-one-catalog-out over the four core
catalogs, GitHub's pack constants by leave-one-set-out over its tuning sets; tuning sets only.

* ``bound``: how many person queries *either* ranking has in its top 5 (lexical top 5 ∪ cosine
  top 5), the most a fusion of the two could find at 5 without new inputs;
* ``views``: the query embedded as several views (whole; its clauses split at punctuation; the
  request after a scene, :func:`gateway.discovery.clauses.split_context`; the lexical reading's
  concept phrases; the query followed by the spec words its concepts add), a tool's cosine the
  max or the mean over the views, or the views' vectors summed (``meanvec``), or the whole
  query's cosine plus λ × the clauses' max or mean;
* ``prf``: pseudo-relevance feedback after the fusion: the fused top K re-ranked by each tool's
  cosine to the centroid of the fused top m (z-scored, β × it added to the fused score; the
  lexical first kept within 3 as served);
* ``absent``: the lexical ranking's confidence corrected by the share of the query's concepts the
  catalog lacks (a concept of IDF 0 weighs nothing in the coverage, so a chatty query whose one
  known word the top tool holds looks fully covered): ``sure_core`` + γ × that share (or the
  absent count, or the words beyond 6 over 6), γ fitted with the grid.

None reaches the bar; the bound says none could with these inputs (stripe's is 20 of 30).
Results: ``docs/discovery.md``, "Person wording".

Run::

    PYTHONPATH=$PWD .venv/bin/python bench/person_wording.py [--cache /tmp/fusion_eval.pkl] [bound views prf absent]

(``--cache`` as ``bench/fusion_fit.py``'s; the query views are encoded with the gateway's numpy
encoder, ~20 s of CPU, and kept in ``--encoded``.)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import itertools
import pickle
import re
import sys
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import fusion_fit as ff  # noqa: E402

from gateway.discovery.clauses import split_context  # noqa: E402
from gateway.discovery.fusion import CALIBRATION, Calibration, fuse  # noqa: E402
from gateway.discovery.index import SearchHit  # noqa: E402
from gateway.discovery.packs import lexicon  # noqa: E402
from gateway.discovery.query import parse  # noqa: E402
from tests.discovery.fusion_eval import VECTORS, replay  # noqa: E402

Views = Callable[[str, bool], list[str]]  # (embedded query text, pack?) -> extra views


class Dense:
    """Tool vectors of the committed files and an encoder (cached on disk) for new query views."""

    def __init__(self, encoded: Path) -> None:
        self.path, self.cache = encoded, (pickle.loads(encoded.read_bytes()) if encoded.exists() else {})
        self.model: Any = None
        self.tools: dict[str, tuple[list[str], np.ndarray[Any, Any], dict[str, str]]] = {}

    def catalog(self, name: str) -> tuple[list[str], np.ndarray[Any, Any], dict[str, str]]:
        if name not in self.tools:
            with np.load(VECTORS / f"{name}.npz") as z:
                tv = z["tool_vectors"].astype(np.float32)
                tv /= np.linalg.norm(tv, axis=-1, keepdims=True)
                self.tools[name] = (list(z["tool_names"]), tv, dict(zip(list(z["queries"]), list(z["query_texts"]), strict=True)))
        return self.tools[name]

    def encode(self, texts: list[str]) -> np.ndarray[Any, Any]:
        todo = [t for t in dict.fromkeys(texts) if t not in self.cache]
        if todo:
            if self.model is None:
                from gateway.discovery.local_model import model_dir
                from gateway.discovery.minilm import MiniLM
                self.model = MiniLM(model_dir())
            for i in range(0, len(todo), 64):
                for t, v in zip(todo[i:i + 64], self.model.encode(todo[i:i + 64]), strict=True):
                    self.cache[t] = np.asarray(v, np.float32)
            self.path.write_bytes(pickle.dumps(self.cache))
        return np.stack([self.cache[t] for t in texts])

    def ranking(self, catalog: str, query: str, views: Views, mode: str, lam: float, pack: bool) -> list[SearchHit]:
        """The cosine top 50 of *query* as served (min_similarity 0), its tool scores combined over
        the query's views by *mode*."""
        names, tv, embedded = self.catalog(catalog)
        text = embedded[query]
        texts = [text, *views(text, pack)]
        q = self.encode(texts)
        sims = np.einsum("ivj,qj->iqv", tv, q).max(axis=2)  # tools × query views (a tool's best view)
        if len(texts) == 1 or mode == "whole":
            score = sims[:, 0]
        elif mode == "max":
            score = sims.max(1)
        elif mode == "mean":
            score = sims.mean(1)
        elif mode == "whole+max":
            score = sims[:, 0] + lam * sims[:, 1:].max(1)
        elif mode == "whole+mean":
            score = (sims[:, 0] + lam * sims[:, 1:].mean(1)) / (1 + lam)
        elif mode == "meanvec":
            v = q.sum(0)
            score = np.einsum("ivj,j->iv", tv, v / np.linalg.norm(v)).max(axis=1)
        else:
            raise ValueError(mode)
        order = np.lexsort((np.arange(len(score)), -score))[:50]
        return [SearchHit(names[i], float(score[i])) for i in order if score[i] >= 0.0]


_LEX = {False: lexicon(()), True: lexicon(("github",))}
_CLAUSE = re.compile(r"\s*(?:[,;:?!.](?=\s|$)|\s[-–—]{1,2}\s|\s\+\s)\s*")


def clauses(text: str, pack: bool) -> list[str]:
    parts = [p.strip() for p in _CLAUSE.split(text) if p and len(p.split()) >= 2]
    return parts if len(parts) >= 2 else []


def request(text: str, pack: bool) -> list[str]:
    context, asked = split_context(text, _LEX[pack].imperative)
    return [asked] if context else []


def _phrases(text: str, pack: bool) -> list[str]:
    return list(dict.fromkeys(p for c in parse(text, None, _LEX[pack]).concepts for p in c.phrases))


def concepts(text: str, pack: bool) -> list[str]:
    words = _phrases(text, pack)
    return [" ".join(words)] if words else []


def expanded(text: str, pack: bool) -> list[str]:
    new = [p for p in _phrases(text, pack) if p not in text.lower()]
    return [f"{text} ({', '.join(new)})"] if new else []


def with_dense(rows: list[ff.Row], dense: Dense, views: Views, mode: str, lam: float = 0.0) -> list[ff.Row]:
    out = []
    for r in rows:
        tasks = []
        for t in r.tasks:
            d = dense.ranking(r.catalog, t.query, views, mode, lam, t.domain_pack)
            tasks.append(replace(t, dense_candidates=d, dense=[h.name for h in d[:5]]))
        out.append(ff.Row(r.catalog, r.tasks_file, r.measurement_only, tasks))
    return out


def _fit(rows: list[ff.Row]) -> tuple[str, Calibration, dict[str, Calibration]]:
    core = {c: [r for r in rows if r.catalog == c] for c in ff.CORE}
    pack = {r.name: [r] for r in rows if r.catalog not in ff.CORE}
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        fc, folds = ff.grid_fit(core, ff.core_grid(CALIBRATION, leads=False), "core")
        fp, _ = ff.grid_fit(pack, [replace(fc, k_pack=k, sure_pack=s)
                                   for k, s in itertools.product(ff.K_PACK_GRID, ff.SURE_PACK_GRID)], "pack")
    held = [line.split("held-out total ")[1].split(";")[0] for line in buf.getvalue().splitlines()
            if "held-out total" in line]
    fit_all = ff.totals([ff.counts(r, ff.served(fc)) for r in rows if r.catalog in ff.CORE])
    return f"core held out {held[0]}, fitted on all {fit_all}; GitHub held out {held[1]}", replace(fc, k_pack=fp.k_pack, sure_pack=fp.sure_pack), folds


def report(label: str, rows: list[ff.Row], ranking: Callable[[Calibration], ff.Ranking] | None = None) -> None:
    """Per core catalog and wording: dense alone, fused, held out. With the served fusion
    (*ranking* None) the constants are refitted as ``bench/fusion_fit.py`` does; another *ranking*
    is measured at the served constants (its own are the variants printed)."""
    if ranking is None:
        summary, fitted, folds = _fit(rows)
        ranking = ff.served
    else:
        fitted, folds = CALIBRATION, dict.fromkeys(ff.CORE, CALIBRATION)
        core = [ff.counts(r, ranking(CALIBRATION)) for r in rows if r.catalog in ff.CORE]
        summary = f"at the served constants: core {ff.totals(core)}"
    print(f"\n== {label}\n   {summary}")
    for c in ff.CORE:
        r = next(r for r in rows if r.catalog == c)
        f, h = ff.counts(r, ranking(fitted)), ff.counts(r, ranking(folds[c]))
        print(f"   {c:9}" + "  ".join(f"{w}: dense {f[w][4]}/{f[w][5]} fused {f[w][0]}/{f[w][1]} held {h[w][0]}/{h[w][1]}"
                                      for w in ("person", "model")))
    gh = [r for r in rows if r.catalog not in ff.CORE]
    print(f"   GitHub fused {ff.totals([ff.counts(r, ranking(fitted)) for r in gh])}; "
          f"constants {fitted.k_core}/{fitted.sure_core}, pack {fitted.k_pack}/{fitted.sure_pack}")


def bound(rows: list[ff.Row]) -> None:
    print("\nper core catalog and wording (found @5 of 30): lexical, dense, fused as served, "
          "lexical top 5 ∪ dense top 5, top 10 ∪ top 10")
    for r in rows:
        if r.catalog not in ff.CORE:
            continue
        for by in ("person", "model"):
            ts = [t for t in r.tasks if t.by == by]

            def within(t: Any, k: int) -> bool:
                return bool(t.want & {h.name for h in [*t.lex_candidates[:k], *t.dense_candidates[:k]]})
            fused = sum(bool(t.want & set(ff.served(CALIBRATION)(t)[:5])) for t in ts)
            print(f"   {r.catalog:9} {by:7} {sum(bool(t.want & set(t.lexical)) for t in ts):3} "
                  f"{sum(bool(t.want & set(t.dense)) for t in ts):3} {fused:3} "
                  f"{sum(within(t, 5) for t in ts):3} {sum(within(t, 10) for t in ts):3}")


def views(rows: list[ff.Row], dense: Dense) -> None:
    report("served inputs (the query whole)", rows)
    for name, fn in (("clauses", clauses), ("request", request), ("concepts", concepts), ("expanded", expanded)):
        for mode in ("max", "mean", "meanvec"):
            report(f"views: whole + {name}, {mode}", with_dense(rows, dense, fn, mode))
    for mode, lam in (("whole+max", 0.5), ("whole+mean", 1.0)):
        report(f"views: clauses, {mode} λ {lam}", with_dense(rows, dense, clauses, mode, lam))


def prf(rows: list[ff.Row], dense: Dense) -> None:
    def ranking(beta: float, k: int, m: int) -> Callable[[Calibration], ff.Ranking]:
        def at(cal: Calibration) -> ff.Ranking:
            def rank(t: Any) -> list[str]:
                full = fuse(t.lex_candidates, t.dense_candidates, 50, domain_pack=t.domain_pack, calibration=cal)
                cat = next(c for c, (names, _, embedded) in dense.tools.items() if t.query in embedded)
                names, tv, _ = dense.tools[cat]
                idx = {n: i for i, n in enumerate(names)}
                if not full:
                    return t.backfill[:5]
                centre = tv[[idx[h.name] for h in full[:m]]].mean(axis=(0, 1))
                head = full[:k]
                c = np.array([(tv[idx[h.name]] @ centre).max() for h in head])
                z = (c - c.mean()) / (c.std() or 1.0)
                s = [h.score + beta * zi for h, zi in zip(head, z, strict=True)]
                out = [head[i].name for i in sorted(range(len(head)), key=lambda i: (-s[i], i))]
                first = t.lex_candidates[0].name if t.lex_candidates else None
                if first in out and out.index(first) >= 3:
                    out.remove(first)
                    out.insert(2, first)
                out = [*out, *(h.name for h in full[k:])][:5]
                return out + [n for n in t.backfill if n not in out][:5 - len(out)]
            return rank
        return at
    for r in rows:
        dense.catalog(r.catalog)
    for beta, k, m in itertools.product((0.05, 0.1, 0.2), (10, 20), (1, 3)):
        report(f"prf: β {beta}, top {k} re-ranked by the centroid of the fused top {m}", rows, ranking(beta, k, m))


async def _absent_shares() -> dict[tuple[str, str], tuple[float, int, int]]:
    """Per (catalog, query): the share of its concepts the catalog lacks, their count, its words."""
    from gateway.discovery.catalog_search import CatalogSearch
    from gateway.discovery.rank import _idf
    from gateway.discovery.words import split_words
    from tests.discovery import fusion_eval as fe
    from tests.support import running_gateway

    out: dict[tuple[str, str], tuple[float, int, int]] = {}
    cats = fe.catalogs()
    with tempfile.TemporaryDirectory() as tmp:
        async with running_gateway(fe.config_text(cats), base_dir=tmp) as gw:
            for cat in cats:
                search = CatalogSearch(fe._host(gw, cat.name).view, packs=cat.packs)
                search.refresh()
                ix = search.index
                for f in fe.task_files(cat):
                    for raw in fe.bench().load_set(cat, f)[1]:
                        p = parse(raw["query"], ix._heads.names, ix.lexicon, ix._heads.abbreviated)
                        absent = sum(_idf(c, ix._df, ix._len) == 0 for c in p.concepts)
                        out[(cat.name, raw["query"])] = (absent / max(1, len(p.concepts)), absent,
                                                         len(split_words(raw["query"])))
    return out


def absent(rows: list[ff.Row]) -> None:
    """γ fitted with k_core × sure_core (leave one core catalog out): γ is the idea's own constant."""
    shares = asyncio.run(_absent_shares())
    catalog_of = {t.query: r.catalog for r in rows for t in r.tasks}
    core = {c: [r for r in rows if r.catalog == c] for c in ff.CORE}
    for kind, feature in (("share of concepts absent", lambda f: f[0]), ("absent count", lambda f: float(f[1])),
                          ("(words - 6) / 6", lambda f: max(0, f[2] - 6) / 6)):
        grid = [(replace(CALIBRATION, k_core=k, sure_core=s), g)
                for k, s, g in itertools.product(ff.K_CORE_GRID, ff.SURE_CORE_GRID, (0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0))]

        def ranking(cal: Calibration, gamma: float, feature: Any = feature) -> ff.Ranking:
            def rank(t: Any) -> list[str]:
                x = feature(shares[(catalog_of[t.query], t.query)])
                return replay(t, fuse, domain_pack=t.domain_pack,
                              calibration=replace(cal, sure_core=cal.sure_core + gamma * x))
            return rank
        table = {i: {c: [ff.counts(r, ranking(cal, g)) for r in core[c]] for c in ff.CORE}
                 for i, (cal, g) in enumerate(grid)}

        def best(names: list[str], table: dict[int, dict[str, list[dict[str, ff.Counts]]]] = table) -> int:
            return max(table, key=lambda j: (ff.merit([x for c in names for x in table[j][c]]), -j))
        held: list[dict[str, ff.Counts]] = []
        print(f"\n== absent: sure_core + γ × {kind} (k_core, sure_core, γ fitted)")
        for c in ff.CORE:
            i = best([h for h in ff.CORE if h != c])
            held += table[i][c]
            got = table[i][c][0]
            print(f"   {c:9} held out with {grid[i][0].k_core}/{grid[i][0].sure_core} γ {grid[i][1]}: "
                  f"person {got['person'][0]}/{got['person'][1]}  model {got['model'][0]}/{got['model'][1]}")
        i = best(list(ff.CORE))
        print(f"   held out {ff.totals(held)}; fitted on all {grid[i][0].k_core}/{grid[i][0].sure_core} γ {grid[i][1]} "
              f"{ff.totals([x for c in ff.CORE for x in table[i][c]])}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("steps", nargs="*", default=["bound", "views", "prf", "absent"])
    parser.add_argument("--cache", type=Path, help="bench/fusion_fit.py's cache of the evaluated tasks")
    parser.add_argument("--encoded", type=Path, default=Path(tempfile.gettempdir()) / "person_wording_vectors.pkl")
    args = parser.parse_args(argv)
    rows = [r for r in ff.load(args.cache) if not r.measurement_only]  # tuning sets only
    dense = Dense(args.encoded)
    for step in args.steps:
        {"bound": lambda: bound(rows), "views": lambda: views(rows, dense), "prf": lambda: prf(rows, dense),
         "absent": lambda: absent(rows)}[step]()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

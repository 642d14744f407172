"""Fit and cross-validate the fusion's constants on the recorded inputs of the tuning sets (issue 28).

``tests/discovery/fusion_eval.py`` records, for every labelled task, what the served fusion is
given (the lexical top 50 with scores, the cosine top 50 with cosines, the lexical back-fill); this
script replays :func:`gateway.discovery.fusion.fuse` on them with other
:class:`~gateway.discovery.fusion.Calibration` constants, so they can be refitted in one command
when the committed vectors (what text is embedded) or the lexical ranker's scores change:

* **core** (endpoints without a domain pack): ``k_core`` × ``sure_core`` on a grid, chosen on the
  four core-only tuning catalogs (stripe, twilio, opsgenie, vikunja) by leave-one-catalog-out
  cross-validation: fitted on three, measured on the fourth; all four folds are printed, then the
  constants fitted on all four (what ``fusion.py`` should hold);
* **pack** (GitHub with its pack): ``k_pack`` × ``sure_pack`` on a grid, leave-one-set-out over
  GitHub's tuning sets (every ``github-tasks*.yaml`` but blind5);
* the criterion, per (catalog or set, wording): found at 1 plus found at 5, minus 3 for every
  query by which the fusion is below the better of lexical and dense alone at 1 or at 5 (issue
  28's bar: never below its better part), summed over the wordings (``person``, ``model``, all);
* a table of every tuning catalog, set and wording at @1/@5 (counts): plain BM25, lexical alone,
  dense alone, round 3's fusion (``BEFORE``), the fusion as ``fusion.py`` holds it, the refit, and
  for the core the held-out fold.

``lexical_first_within``, ``w_min``, ``w_max`` and ``absent_gap`` are not fitted (``--tried``
shows the lexical first's floor against none and other floors), nor are ``lexical_lead`` and
``cosine_lead`` (0: ``--tried`` cross-validates them). ``--tried`` also cross-validates the designs that
were tried and left out (``fusion.py``'s module doc), ``--measurement`` prints the
measurement-only sets (box, digitalocean, slack, sendgrid, GitHub's blind5) as aggregates only,
per catalog and wording, for the report: never a query, and never used to choose.

Run::

    PYTHONPATH=$PWD .venv/bin/python bench/fusion_fit.py [--cache /tmp/fusion_eval.pkl] [--tried] [--measurement]

(``--cache`` keeps the evaluated tasks between runs: the gateway run takes ~50 s; delete the file
when the vectors or the ranker change.)
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import pickle
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from gateway.discovery.fusion import CALIBRATION, Calibration, fuse  # noqa: E402
from tests.discovery.fusion_eval import LIMIT, Task, evaluate, replay  # noqa: E402

CORE = ("stripe", "twilio", "opsgenie", "vikunja")
K_CORE_GRID = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 1.0)
SURE_CORE_GRID = (1.6, 1.8, 2.0, 2.2, 2.4, 2.8)
LEXICAL_LEAD_GRID = (0.0, 0.5, 1.0)
COSINE_LEAD_GRID = (0.0, 0.25, 0.5)
K_PACK_GRID = (0.01, 0.02, 0.03, 0.04, 0.05, 0.06)
SURE_PACK_GRID = (1.2, 1.4, 1.6, 1.8, 2.0, 2.2, 2.4)
GAP_COST = 3  # a query below the better part costs three found ones
# The fusion of round 3, before this fit (a column of the table): no floor for the lexical first,
# the pack's weight 0.03 falling off from the same 2.0 as the core's.
BEFORE = replace(CALIBRATION, k_core=0.6, sure_core=2.0, k_pack=0.03, sure_pack=2.0, lexical_lead=0.0, cosine_lead=0.0,
                 lexical_first_within=0)

Counts = tuple[int, int, int, int, int, int, int, int]  # fused@1/@5, lexical, dense, bm25


@dataclass
class Row:
    catalog: str
    tasks_file: str
    measurement_only: bool
    tasks: list[Task]

    @property
    def name(self) -> str:
        return self.tasks_file.removesuffix(".yaml")


def load(cache: Path | None) -> list[Row]:
    if cache and cache.exists():
        return [Row(*fields) for fields in pickle.loads(cache.read_bytes())]
    rows = [Row(ev.catalog.name, ev.tasks_file, ev.measurement_only, ev.tasks) for ev in asyncio.run(evaluate())]
    if cache:
        cache.write_bytes(pickle.dumps([(r.catalog, r.tasks_file, r.measurement_only, r.tasks) for r in rows]))
    return rows


def _wordings(tasks: Sequence[Task]) -> dict[str, list[int]]:
    out = {by: [i for i, t in enumerate(tasks) if t.by == by] for by in ("person", "model")}
    return {**{k: v for k, v in out.items() if v}, "all": list(range(len(tasks)))}


Ranking = Callable[[Task], list[str]]


def served(cal: Calibration) -> Ranking:
    """The served answer (fusion, then back-fill) with the constants *cal*."""
    return lambda t: replay(t, fuse, domain_pack=t.domain_pack, calibration=cal)


def counts(row: Row, ranking: Ranking) -> dict[str, Counts]:
    """Per wording: found at 1 and at 5 by *ranking*, the lexical, the dense and plain BM25 rankings."""
    lists = [[ranking(t)[:LIMIT] for t in row.tasks], [t.lexical for t in row.tasks],
             [t.dense for t in row.tasks], [t.bm25 for t in row.tasks]]
    out: dict[str, Counts] = {}
    for wording, idx in _wordings(row.tasks).items():
        c: list[int] = []
        for top in lists:
            c += [sum(bool(top[i]) and top[i][0] in row.tasks[i].want for i in idx),
                  sum(bool(row.tasks[i].want & set(top[i])) for i in idx)]
        out[wording] = (c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7])
    return out


def gaps(c: Counts) -> tuple[int, int]:
    return max(0, max(c[2], c[4]) - c[0]), max(0, max(c[3], c[5]) - c[1])


def merit(results: Sequence[dict[str, Counts]]) -> float:
    return sum(c[0] + c[1] - GAP_COST * sum(gaps(c)) for res in results for c in res.values())


def totals(results: Sequence[dict[str, Counts]]) -> tuple[int, int, int]:
    """Found at 1, at 5 (over the wordings person and model, or all when a set has none), and gaps."""
    n1 = n5 = g = 0
    for res in results:
        for wording, c in res.items():
            g += sum(gaps(c))
            if wording != "all" or len(res) == 1:
                n1, n5 = n1 + c[0], n5 + c[1]
    return n1, n5, g


def grid_fit(groups: dict[str, list[Row]], candidates: list[Calibration], label: str,
             ) -> tuple[Calibration, dict[str, Calibration]]:
    """Leave one group out: the best candidate on the others, measured on it; then the best on all."""
    table = {i: {g: [counts(r, served(c)) for r in rows] for g, rows in groups.items()}
             for i, c in enumerate(candidates)}

    def best(names: Sequence[str]) -> int:
        return max(table, key=lambda i: (merit([x for g in names for x in table[i][g]]), -i))

    held_out: list[dict[str, Counts]] = []
    folds: dict[str, Calibration] = {}
    print(f"\n{label}: leave one out (fitted on the others -> measured on it: found @1, @5, gaps)")
    for g in groups:
        i = best([h for h in groups if h != g])
        held_out += table[i][g]
        folds[g] = candidates[i]
        print(f"  {g:22} {_short(candidates[i])}  {totals(table[i][g])}")
    chosen = best(list(groups))
    print(f"  held-out total {totals(held_out)}; fitted on all: {_short(candidates[chosen])} "
          f"{totals([x for g in groups for x in table[chosen][g]])}")
    return candidates[chosen], folds


def _short(c: Calibration) -> str:
    return (f"core {c.k_core}/{c.sure_core} pack {c.k_pack}/{c.sure_pack} leads {c.lexical_lead}/{c.cosine_lead} "
            f"first within {c.lexical_first_within}")


def core_grid(base: Calibration, leads: bool = True) -> list[Calibration]:
    """k_core x sure_core (x lexical_lead x cosine_lead when *leads*, else those of *base*)."""
    la, cb = (LEXICAL_LEAD_GRID, COSINE_LEAD_GRID) if leads else ((base.lexical_lead,), (base.cosine_lead,))
    return [replace(base, k_core=k, sure_core=s, lexical_lead=a, cosine_lead=b)
            for k, s, a, b in itertools.product(K_CORE_GRID, SURE_CORE_GRID, la, cb)]


def print_table(rows: list[Row], columns: dict[str, Ranking], held_out: dict[str, Ranking] | None = None) -> None:
    names = ["BM25", "lexical", "dense", *columns] + (["held-out"] if held_out else [])
    print(f"\n{'catalog':10}{'set':22}{'wording':>8}{'n':>5}" + "".join(f"{h:>12}" for h in names)
          + "   (found @1/@5; * below the better of lexical and dense)")
    for row in rows:
        per = {k: counts(row, f) for k, f in columns.items()}
        if held_out and row.catalog in held_out:
            per["held-out"] = counts(row, held_out[row.catalog])
        for wording, idx in _wordings(row.tasks).items():
            base = next(iter(per.values()))[wording]
            cells = [f"{base[6]}/{base[7]}", f"{base[2]}/{base[3]}", f"{base[4]}/{base[5]}"]
            for k in names[3:]:
                if k in per:
                    c = per[k][wording]
                    cells.append(f"{c[0]}/{c[1]}" + ("*" if gaps(c) != (0, 0) else ""))
                else:
                    cells.append("")
            print(f"{row.catalog:10}{row.name:22}{wording:>8}{len(idx):>5}" + "".join(f"{x:>12}" for x in cells))


def measurement(rows: list[Row], columns: dict[str, Ranking]) -> None:
    """Aggregates only (recall per catalog, set and wording): never a query, never to choose."""
    print("\nmeasurement-only sets (aggregates; not used to choose): recall@1/@5")
    print(f"{'catalog':14}{'set':22}{'wording':>8}{'n':>5}" + "".join(f"{h:>14}" for h in ["BM25", "lexical", "dense", *columns]))
    for row in rows:
        per = {k: counts(row, f) for k, f in columns.items()}
        for wording, idx in _wordings(row.tasks).items():
            n = len(idx)
            base = next(iter(per.values()))[wording]
            cells = [(base[6], base[7]), (base[2], base[3]), (base[4], base[5])] + [per[k][wording][:2] for k in columns]
            print(f"{row.catalog:14}{row.name:22}{wording:>8}{n:>5}"
                  + "".join(f"{a / n:>8.3f}/{b / n:.3f}"[-14:].rjust(14) for a, b in cells))


# ---- the listwise logistic (--tried) ----

def _features(t: Task) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any], list[str]]:
    """Per candidate, as fuse sees them: lexical score (a tool only the cosine found: the lowest
    minus ``absent_gap``), cosine z (one only the lexical ranking found: the lowest), z·top, z·lead."""
    lex = {h.name: h.score for h in reversed(t.lex_candidates)}
    cos = {h.name: h.score for h in reversed(t.dense_candidates)}
    names = list(dict.fromkeys([*lex, *cos]))
    c = np.array(list(cos.values()))
    spread = c.std() if len(c) > 1 else 0.0
    z = {n: (v - c.mean()) / spread if spread > 1e-9 else 0.0 for n, v in cos.items()}
    l_absent = min(lex.values(), default=0.0) - CALIBRATION.absent_gap
    z_absent = min(z.values(), default=0.0)
    ranked = sorted(lex.values(), reverse=True)
    top, lead = (ranked[0] if ranked else 0.0), (ranked[0] - ranked[1] if len(ranked) > 1 else 0.0)
    zz = np.array([z.get(n, z_absent) for n in names])
    x = np.c_[[lex.get(n, l_absent) for n in names], zz, zz * top, zz * lead]
    return x, np.array([n in t.want for n in names], float), names


def fit_listwise(tasks: Sequence[Task], l2: float = 1e-2) -> np.ndarray[Any, Any]:
    """A conditional logit (softmax over each query's candidates) by damped Newton steps."""
    data = [(x, y) for x, y, _ in map(_features, tasks) if y.any()]
    w = np.zeros(data[0][0].shape[1])

    def state(w: np.ndarray[Any, Any]) -> tuple[float, np.ndarray[Any, Any], np.ndarray[Any, Any]]:
        ll, g, h = -0.5 * l2 * w @ w, -l2 * w, -l2 * np.eye(len(w))
        for x, y in data:
            s = x @ w
            s = s - s.max()
            p = np.exp(s) / np.exp(s).sum()
            mu = p @ x
            ll += (y @ s) / y.sum() - np.log(np.exp(s).sum())
            g = g + (y @ x) / y.sum() - mu
            h = h - ((x - mu) * p[:, None]).T @ (x - mu)
        return ll, g, h

    ll, g, h = state(w)
    for _ in range(100):
        step, t = -np.linalg.solve(h, g), 1.0
        while True:
            ll2, g2, h2 = state(w + t * step)
            if ll2 >= ll - 1e-12 or t < 1e-6:
                break
            t /= 2
        w, done = w + t * step, abs(ll2 - ll) < 1e-9
        ll, g, h = ll2, g2, h2
        if done:
            break
    return w


def listwise_ranking(w: np.ndarray[Any, Any]) -> Ranking:
    def rank(t: Task) -> list[str]:
        x, _, names = _features(t)
        s = x @ w
        order = sorted(range(len(names)), key=lambda i: (-s[i], names[i]))
        top = [names[i] for i in order[:LIMIT]]
        return top + [n for n in t.backfill if n not in top][:LIMIT - len(top)]
    return rank


def tried(core: dict[str, list[Row]], rows_pack: list[Row]) -> None:
    print("\n--- tried ---")
    grid_fit(core, core_grid(replace(CALIBRATION, lexical_first_within=0), leads=False),
             "no floor for the lexical first (round 3's design, refitted)")
    for within in (2, 5):
        grid_fit(core, core_grid(replace(CALIBRATION, lexical_first_within=within), leads=False),
                 f"lexical first within {within}")
    leads, _ = grid_fit(core, core_grid(CALIBRATION), "w lowered by the lexical lead, raised by the cosine z lead")
    grid_fit({r.name: [r] for r in rows_pack}, [replace(leads, k_pack=k, sure_pack=s)
                                                for k, s in itertools.product(K_PACK_GRID, SURE_PACK_GRID)],
             "  the same leads on the pack (GitHub)")
    print("\nlistwise logistic (softmax over each query's candidates; features lexical score, z, z·top, z·lead):")
    held: list[dict[str, Counts]] = []
    for g in core:
        w = fit_listwise([t for h, rows in core.items() if h != g for r in rows for t in r.tasks])
        res = [counts(r, listwise_ranking(w)) for r in core[g]]
        held += res
        print(f"  {g:22} weights {np.round(w, 2).tolist()}  {totals(res)}")
    w = fit_listwise([t for rows in core.values() for r in rows for t in r.tasks])
    print(f"  held-out total {totals(held)}; fitted on all: {np.round(w, 2).tolist()} "
          f"{totals([counts(r, listwise_ranking(w)) for rows in core.values() for r in rows])}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, help="keep the evaluated tasks in this file between runs")
    parser.add_argument("--tried", action="store_true", help="also cross-validate the designs left out")
    parser.add_argument("--measurement", action="store_true", help="print the measurement-only sets' aggregates")
    args = parser.parse_args(argv)
    rows = load(args.cache)
    tuning = [r for r in rows if not r.measurement_only]
    core = {c: [r for r in tuning if r.catalog == c] for c in CORE}
    pack = {r.name: [r] for r in tuning if r.catalog not in CORE}
    print(f"served: {_short(CALIBRATION)}; criterion: found @1 + found @5 - {GAP_COST} x queries below the "
          "better part, per wording")
    fit_core, folds = grid_fit(core, core_grid(CALIBRATION, leads=False), "core (no pack)")
    fit_pack, _ = grid_fit(pack, [replace(fit_core, k_pack=k, sure_pack=s)
                                  for k, s in itertools.product(K_PACK_GRID, SURE_PACK_GRID)], "pack (GitHub)")
    fitted = replace(fit_core, k_pack=fit_pack.k_pack, sure_pack=fit_pack.sure_pack)
    # The held-out column: each core catalog ranked with the constants fitted on the other three.
    held_out = {g: served(c) for g, c in folds.items()}
    columns = {"before": served(BEFORE), "served": served(CALIBRATION), "refit": served(fitted)}
    print_table(tuning, columns, held_out)
    print(f"\nrefit: {fitted}")
    if fitted != CALIBRATION:
        print("  differs from gateway/discovery/fusion.py's CALIBRATION: copy it there (and refit the tests' GAPS/FLOORS)")
    if args.tried:
        tried(core, [r for rows in pack.values() for r in rows])
    if args.measurement:
        measurement([r for r in rows if r.measurement_only], columns)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


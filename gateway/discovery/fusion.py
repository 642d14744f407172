"""Fusing the lexical ranking with the embeddings ranking by how sure each side is.

Equal-weight reciprocal-rank fusion (what ``fuse`` was before issue 28) throws the scores away and
gives both rankings the same say on every query. Measured with a real model (all-MiniLM-L6-v2,
``bench/discovery_vectors.py table``), that let a weak ranking overrule a strong one: on GitHub's
labelled sets, where the lexical ranker (with its domain pack) finds 92-100% at 5 and the
embeddings 50-75%, RRF found 71-92%. Without a pack the balance turns: on APIs read by the
general core alone the embeddings are as good or better (an agent's wording of a small API: 70%
first against 30%), and a fusion that trusts the lexical side as on GitHub loses to them. Three
signals say, per query and per endpoint, who to trust, none of them knowing an API:

* the lexical score is a share of the query covered (about 1 when the top tool does everything
  asked, more with name and title hints, near 0 or below when only a word or two matched,
  ``docs/discovery.md``, "Re-rank"): how much the lexical ranking knows about *this* query;
* the cosine, taken relative to the query's own candidates (its z-score: how many standard
  deviations a tool stands above the mean of the semantic list), says how far ahead a tool is;
  unlike a raw cosine it means the same for a model whose cosines all sit near 0.8 as for one
  spread from 0.1 to 0.6, and a query whose nearest tool stands out moves the fusion more;
* whether the endpoint reads queries with a domain pack (``search.packs``): an operator who
  wrote one made the lexical ranker an expert of that API, and it is trusted far more.

What the fusion adds over the weighted sum (round 4): the lexical ranking's first is never fused
below rank ``lexical_first_within`` (3). When the embeddings outvote a lexical first far down
(their cosine puts it low), it is lifted back to rank 3: the tool that covers the query's words
best stays among the first few an agent reads, whatever the cosine says. On the core-only tuning
catalogs this turns 4 queries from missed to found at 5 (3 of Stripe's agent wording, 1 of
Twilio's people's) and costs 1 (Stripe by: person, whose label was fifth), changes nothing at 1
and nothing on GitHub, and closes most of the fusion's deficits at 5 against its better part.

Fitted (``bench/fusion_fit.py``, tuning sets only: the inputs ``tests/discovery/fusion_eval.py``
records, replayed; the criterion per catalog and wording is found at 1 + found at 5 − 3 × queries
below the better of lexical and dense alone) by leave-one-catalog-out over the four core-only
catalogs (stripe, twilio, opsgenie, vikunja; each measured with the constants fitted on the other
three) and leave-one-set-out over GitHub's tuning sets. Counts over the 240 core queries (person
+ model wordings) and GitHub's 638, found @1 / @5 / queries below the better part (at 1 and 5,
all wordings and sets):

* round 3 (the weighted sum alone, K_CORE 0.6, SURE 2.0, K_PACK 0.03): core 126/187/9 as fitted
  on all four; held out, the same design refitted per fold 120/184/16; GitHub 505/622/1;
* round 4 (lexical first within 3; K_CORE 0.6, SURE 2.0 again; the pack's weight K_PACK 0.05
  falling off from SURE_PACK 1.6 instead of 0.03 from 2.0): core 126/190/5, held out 120/190/9
  (three of the four folds pick 0.6/2.0 and the fourth 0.6/1.8 or 0.7/2.0); GitHub 507/623/0,
  and every GitHub fold picks 0.05/1.6 (the pack's weight lies on a ridge, K_PACK × (SURE_PACK −
  top) about constant: 504-507 found first all along it, so its change is within noise; it
  closed GitHub dev's one query at 5). A rank of 2 or 5 instead of 3 measured the same.

Round 5 changed what is embedded, not how it is fused (``hybrid.tool_texts``: a tool's cosine is
the better of its full text's and a short view's, name, title and first sentence; ``hybrid.query_text``:
the query's argument values taken out) and refitted the constants on it by the same protocol:
SURE 2.0 → 1.8 (the core folds pick 0.6/1.8 three times, 0.3/2.4 once), the pack's K_PACK 0.05 →
0.02 from SURE_PACK 1.6 → 2.2 (seven of GitHub's eight folds; the same ridge). Core 129/192/3
fitted on all four, 127/192/5 held out (against 126/190/5 and 120/190/9 with round 4's inputs,
each refitted); GitHub 508/624/0, held out 507/624/1. The other inputs measured, each refitted
the same way (held out core, then GitHub): the inputs of round 4 120/190/9, 507/623/0; no
parameters in the tool's text 121/187/12, 501/620/3; values out alone 120/189/9, 506/623/0; both
124/189/8, 500/620/3; a 200-character description and values out 116/190/14, 509/623/0; the two
views without values out 127/188/8 (``docs/discovery.md``, "What is embedded").

Tried and left out (round 4, same protocol):

* the leads of both firsts in the weight (the brief's "confidence from the dense side too"):
  ``w = K · clamp(SURE − top − a · lexical lead + b · cosine z lead)``, the lexical first's lead
  over its second and the cosine first's over its second in z (each alone says who is right on
  the queries where the two firsts disagree better than the top score does: on the core's 84
  such queries where one of them is right, AUC 0.71 for the lexical lead and 0.76 for the z lead,
  against 0.67 for the top score). Fitted on all four, a 0.5, b 0.25 with K 0.8, SURE 1.8: 125/
  191/3; held out 122/188/8, the folds choosing different leads (1/0.5, 0.5/0, 0.5/0, 1/0.5);
  on GitHub 505/623/0 in-sample, 505/622/1 held out. Within noise of the simpler design, two
  more constants: ``lexical_lead`` and ``cosine_lead`` stay 0 (a refit may weigh them).
* a listwise logistic (a softmax over each query's candidates, fitted by Newton steps: lexical
  score, z, z × top, z × lexical lead): 123/193/8 fitted on all, 122/192/9 held out; as good
  held out, worse fitted, and a score without the top-score clamp's meaning. Other feature sets
  (lexical and cosine ranks, being in both lists, the cosine top's lead, its top cosine) held out
  115-122 first; the ranks cost the most at 1.
* a mixture of the two rankings as probabilities (a softmax over each list's scores with its own
  temperature, mixed with a fitted share): 112 first held out.
* a per-query choice between the two firsts by a logistic on the query's signals (top score,
  leads, z of the cosine first, each first's rank in the other list): on the 176 core queries
  whose two firsts differ the fusion's first is right on 74, the choice's on 53-68 held out.
* keeping the cosine's first within the top 3 too: +1 at 5 on the core, −7 at 5 on GitHub.

A BM25 ranking as a third input (after round 5; ``bench/fusion_bm25.py``, same protocol, the
constants refitted with each variant): the index's own BM25 candidate order (free), the bench's
plain BM25 (the bar's baseline) or the index's table queried with the query's own words, each
added as a score term (share of its best score, z-score × w, or reciprocal rank), as a floor for
its first (within the top 2-5), as a floor only when it is the cosine's first, or as a confidence
(the cosine's weight raised when BM25's first is the cosine's and not the lexical first, or
lowered when it is the lexical first). None gains held out: core 123-129 first / 189-192 at 5
against 128/192 for this design on the same grid, GitHub 500-507/623-625 against 507/624. Where
a BM25 first is not the fused first, the fused first is right 2-4 times as often, whoever BM25
agrees with; and the fusion is already never below plain BM25 on a tuning set.

Round 3, for the record (replayed on the same inputs):

* pseudo-relevance feedback on the embeddings' side (Rocchio in the embedding space, the query's
  vector plus α times the mean vector of the lexical top 1-5, the cosine top 1-5, both, or the
  fused top 1-5, α 0.15-1, used instead of or beside the cosine ranking). It makes the cosine
  ranking alone much better (core-only catalogs 97 -> 106-112 first of 240, GitHub 210 -> 300-500
  first of 638) and the fusion never better (at best 8 (catalog, wording, @k) counts below its
  better part against 9 without it, and then 8 fewer found first): the fed-back query already
  carries the lexical ranking's picks, so the fusion counts the lexical evidence twice and loses
  the independent second opinion that wins the agents' wordings of a small API.
* a third term, each candidate's cosine to the lexical top hit's vector (or the mean of the top
  3's), z-scored and added at 0.1-0.4 of the query's: 10-14 below the better part, 113-121 first.
* normalising the lexical scores by their top score: the general ranker's top scores kept their
  scale (about 1 for a covered query) when its full-text share changed, and the absolute score is
  what says how much of the query was covered; divided by the top, 3-5 fewer queries were found
  first.

Still short: at 1 nothing measured beats the weighted sum held out by more than noise (a query
more or less per catalog); the queries where the lexical first is right and the cosine's wrong
(Stripe's agent wording) and those where it is the other way round (vikunja's) carry no signal
the fusion can see that tells them apart. An oracle choosing the best w per query would find
158 of the core's 240 first, against 126.

Contract of :func:`fuse`:

* Each tool of either list scores ``lexical score + w · z``, where ``z`` is its cosine's z-score
  over the semantic list and ``w = weight · K · clamp(SURE − best lexical score − lexical_lead ·
  its lead + cosine_lead · the z lead, W_MIN, W_MAX)`` with ``K, SURE = K_PACK, SURE_PACK`` when
  *domain_pack* else ``K_CORE, SURE`` (the leads weigh 0 as calibrated): the better the lexical
  ranking covers the query, the less the embeddings may move it, and when it covered little they
  decide. A tool missing from the lexical list (it shares no word with the query) counts the
  lowest lexical score minus ``ABSENT_GAP``; a tool missing from the semantic list counts that
  list's lowest z (it is at most that close). A semantic list whose cosines are all equal (or a
  single tool) has z = 0 throughout: it cannot reorder anything.
* They are ordered by score, ties going to the better lexical rank, then the better semantic
  rank, then the name (deterministic); then the lexical list's first, when it fell below rank
  ``LEXICAL_FIRST_WITHIN``, is moved up to that rank and takes the score of the tool it passes
  there. The best *limit* are returned, scores never rising, a larger limit extending a smaller
  one's list.
* It sees only what it is given: both lists must already be restricted to the caller's visible
  tools (the fused result never holds a tool neither list held). Either list may be empty: the
  other one's order is kept.
* Nothing in it knows an API: the constants (:class:`Calibration`) are fitted on the scale of the
  general lexical ranker's score, on the tuning sets of issue 28 only (stripe, twilio-api,
  opsgenie, vikunja and GitHub's sets other than blind5), by ``bench/fusion_fit.py`` (run it
  again when the committed vectors or the lexical ranker's scores change);
  ``tests/discovery/test_fusion_recall.py`` checks them.
"""

from __future__ import annotations

import heapq
import math
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from statistics import fmean

from gateway.discovery.index import SearchHit

__all__ = ["fuse", "Calibration", "CALIBRATION", "SURE", "SURE_PACK", "W_MIN", "W_MAX", "K_CORE", "K_PACK",
           "ABSENT_GAP", "LEXICAL_LEAD", "COSINE_LEAD", "LEXICAL_FIRST_WITHIN"]


@dataclass(frozen=True)
class Calibration:
    """The fusion's constants (fitted by ``bench/fusion_fit.py`` on the tuning sets only)."""

    # The z-score's scale against the lexical score's, and the lexical top score at which the
    # embeddings' say bottoms out (at w_min), without a domain pack (the general core) ...
    k_core: float = 0.6
    sure_core: float = 1.8
    # ... and with one (the lexical ranking is the expert: a thirtieth of the say).
    k_pack: float = 0.02
    sure_pack: float = 2.2
    # How much the lexical first's lead over its second (in lexical score) lowers the embeddings'
    # say, and how much the cosine first's lead over its second (in z) raises it: 0, tried and
    # within noise (module doc); kept so that a refit can weigh them again.
    lexical_lead: float = 0.0
    cosine_lead: float = 0.0
    w_min: float = 0.3  # the embeddings' least say: they still order tools the lexical ranking scores alike
    w_max: float = 3.0  # the most: a lexical ranking that matched nothing leaves the order to the cosine
    absent_gap: float = 0.3  # how far below the lowest lexical candidate a tool sharing no word starts
    lexical_first_within: int = 3  # the lexical ranking's first is never fused below this rank


CALIBRATION = Calibration()
K_CORE, SURE = CALIBRATION.k_core, CALIBRATION.sure_core
K_PACK, SURE_PACK = CALIBRATION.k_pack, CALIBRATION.sure_pack
W_MIN, W_MAX, ABSENT_GAP = CALIBRATION.w_min, CALIBRATION.w_max, CALIBRATION.absent_gap
LEXICAL_LEAD, COSINE_LEAD = CALIBRATION.lexical_lead, CALIBRATION.cosine_lead
LEXICAL_FIRST_WITHIN = CALIBRATION.lexical_first_within


def fuse(lexical: Sequence[SearchHit], semantic: Sequence[SearchHit], limit: int,
         weight: float = 1.0, domain_pack: bool = False, calibration: Calibration = CALIBRATION) -> list[SearchHit]:
    """The best *limit* tools of both rankings (see the module doc); *weight* scales the cosine's
    say (an endpoint's ``search.embeddings.weight``: 1 as calibrated); *domain_pack*: whether the
    lexical ranking read the query with a domain pack (the endpoint's ``search.packs``);
    *calibration*: the constants (another one only to refit them: ``bench/fusion_fit.py``)."""
    c = calibration
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
    z = _z_scores(cos)
    best = max(lex.values(), default=0.0)
    k, sure = (c.k_pack, c.sure_pack) if domain_pack else (c.k_core, c.sure_core)
    unsure = sure - best
    if c.lexical_lead:  # 0 as calibrated: the leads are computed only when a refit weighs them
        unsure -= c.lexical_lead * _lead(lex.values())
    if c.cosine_lead:
        unsure += c.cosine_lead * _lead(z.values())
    w = weight * k * min(c.w_max, max(c.w_min, unsure))
    lex_absent = min(lex.values(), default=0.0) - c.absent_gap
    z_absent = min(z.values(), default=0.0)
    scores = {name: lex.get(name, lex_absent) + w * z.get(name, z_absent) for name in lex.keys() | z.keys()}
    far = len(lex) + len(cos)
    order = sorted(scores, key=lambda n: (-scores[n], lex_rank.get(n, far), sem_rank.get(n, far), n))
    hits = [SearchHit(name, scores[name]) for name in order]
    first = c.lexical_first_within
    if lexical and first >= 1:
        at = order.index(lexical[0].name)
        if at >= first:  # lifted to rank *first*, taking the score of the tool it passes there
            hits.insert(first - 1, SearchHit(order[at], hits[first - 1].score))
            del hits[at + 1]
    return hits[:max(0, limit)]


def _lead(scores: Iterable[float]) -> float:
    """How far the best of *scores* stands above the second (0 with fewer than two)."""
    top = heapq.nlargest(2, scores)
    return top[0] - top[1] if len(top) == 2 else 0.0


def _z_scores(cos: dict[str, float]) -> dict[str, float]:
    """Each cosine in standard deviations from the list's mean (all 0 when they do not vary)."""
    if not cos:
        return {}
    values = list(cos.values())
    mean, spread = fmean(values), _pstdev(values)
    if spread <= 1e-9:  # one tool, or all alike: nothing to tell them apart by
        return dict.fromkeys(cos, 0.0)
    return {name: (c - mean) / spread for name, c in cos.items()}


def _pstdev(values: list[float]) -> float:
    """``statistics.pstdev(values)`` (finite floats), the same float: the exact population variance
    in integers over one power-of-two denominator, its square root correctly rounded; without the
    Fractions that cost statistics ~0.1 ms for 50 cosines."""
    ratios = [v.as_integer_ratio() for v in values]  # each n / 2**k
    scale = max(d for _, d in ratios)
    ints = [n * (scale // d) for n, d in ratios]
    count = len(ints)
    total = sum(ints)
    # Σ(x - mean)² / count = (count·Σx² - (Σx)²) / (count² · scale²), exactly.
    num = count * sum(i * i for i in ints) - total * total
    den = count * count * scale * scale
    return _sqrt_of_frac(num, den)


_SQRT_BITS = 2 * sys.float_info.mant_dig + 3


def _sqrt_of_frac(n: int, m: int) -> float:
    """The square root of n/m (n >= 0, m > 0) as a float, correctly rounded (round-to-odd on an
    integer square root with enough extra bits, then one rounding: as ``statistics`` does)."""
    q = (n.bit_length() - m.bit_length() - _SQRT_BITS) // 2
    if q >= 0:
        return (_isqrt_rto(n, m << 2 * q) << q) / 1
    return _isqrt_rto(n << -2 * q, m) / (1 << -q)


def _isqrt_rto(n: int, m: int) -> int:
    """The integer square root of n/m, rounded to odd."""
    a = math.isqrt(n // m)
    return a | (a * a * m != n)

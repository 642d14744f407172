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

Tried and left out (round 3, tuning sets only, replayed on the inputs ``tests/discovery/fusion_eval.py``
records):

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

Contract of :func:`fuse`:

* Each tool of either list scores ``lexical score + w · z``, where ``z`` is its cosine's z-score
  over the semantic list and ``w = weight · K · clamp(SURE − best lexical score, W_MIN, W_MAX)``
  with ``K = K_PACK`` when *domain_pack* else ``K_CORE``: the better the lexical ranking covers
  the query, the less the embeddings may move it, and when it covered little they decide.
  A tool missing from the lexical list (it shares no word with the query) counts the lowest
  lexical score minus ``ABSENT_GAP``; a tool missing from the semantic list counts that list's
  lowest z (it is at most that close). A semantic list whose cosines are all equal (or a single
  tool) has z = 0 throughout: it cannot reorder anything.
* The best *limit* are returned, scores never rising; ties go to the better lexical rank, then
  the better semantic rank, then the name (deterministic).
* It sees only what it is given: both lists must already be restricted to the caller's visible
  tools (the fused result never holds a tool neither list held). Either list may be empty: the
  other one's order is kept.
* Nothing in it knows an API: the constants are calibrated on the scale of the general lexical
  ranker's score, on the tuning sets of issue 28 only (stripe, twilio-api, opsgenie, vikunja and
  GitHub's sets other than blind5); ``tests/discovery/test_fusion_recall.py`` checks them.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from statistics import fmean

from gateway.discovery.index import SearchHit

__all__ = ["fuse", "SURE", "W_MIN", "W_MAX", "K_CORE", "K_PACK", "ABSENT_GAP"]

# The lexical top score at which the embeddings' say bottoms out (at W_MIN): a full coverage of
# the query (~1) plus the name/title hints of a clear match; the scores seen run from -0.8 to 1.9.
# Tuned 1.8-2.6 with K_CORE (round 3, the general ranker with bm25_share 0.75, whose top scores
# still sit near 1: median 1.05-1.3 per catalog): 2.0 with K_CORE 0.6 gives the embeddings about
# twice their former say on a middling lexical top (0.6 at a top of 1, was 0.36) and lets it fall
# off faster as the lexical top nears a clear match.
SURE = 2.0
W_MIN = 0.3  # the embeddings' least say: they still order tools the lexical ranking scores alike
W_MAX = 3.0  # the most: a lexical ranking that matched nothing leaves the order to the cosine
# The z-score's scale against the lexical score's, without and with a domain pack. A clear nearest
# tool stands 3-5 deviations above the candidates' mean; without a pack 0.6 lets it move a tool by
# one to two lexical score points (a whole query's coverage) when the lexical top is middling (~1).
# Round 3 (tuning sets only): 0.3 -> 0.6 with SURE 2.2 -> 2.0 took the core-only catalogs' fused
# hits from 118 to 126 first and 186 to 187 in the top 5 (of 240 queries each) and the queries
# where the fusion is below its better part from 14 to 9 (K 0.4-0.8 x SURE 2.0-2.4 tried; 0.5-0.7
# at 2.0-2.2 all within 9-12, 0.8 and above or SURE 2.4 lose again on the agents' Stripe wording).
# A pack makes the lexical ranking the expert: 0.03 (a twentieth) still breaks its near-ties, while
# 0.04 or more already cost GitHub's sets (tuned 0.01-0.06 and 0.1-0.4).
K_CORE = 0.6
K_PACK = 0.03
# How far below the lowest lexical candidate a tool that shares no word with the query starts.
ABSENT_GAP = 0.3


def fuse(lexical: Sequence[SearchHit], semantic: Sequence[SearchHit], limit: int,
         weight: float = 1.0, domain_pack: bool = False) -> list[SearchHit]:
    """The best *limit* tools of both rankings (see the module doc); *weight* scales the cosine's
    say (an endpoint's ``search.embeddings.weight``: 1 as calibrated); *domain_pack*: whether the
    lexical ranking read the query with a domain pack (the endpoint's ``search.packs``)."""
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
    w = weight * (K_PACK if domain_pack else K_CORE) * min(W_MAX, max(W_MIN, SURE - best))
    lex_absent = min(lex.values(), default=0.0) - ABSENT_GAP
    z_absent = min(z.values(), default=0.0)
    scores = {name: lex.get(name, lex_absent) + w * z.get(name, z_absent) for name in lex.keys() | z.keys()}
    far = len(lex) + len(cos)
    order = sorted(scores, key=lambda n: (-scores[n], lex_rank.get(n, far), sem_rank.get(n, far), n))
    return [SearchHit(name, scores[name]) for name in order[:max(0, limit)]]


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

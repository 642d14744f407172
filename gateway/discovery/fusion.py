"""Fusing the lexical ranking with the embeddings ranking by how sure the lexical ranking is.

Equal-weight reciprocal-rank fusion (what ``fuse`` was before issue 28) throws the scores away and
gives both rankings the same say on every query. Measured with a real model (all-MiniLM-L6-v2,
``bench/discovery_vectors.py table``), that let a weak ranking overrule a strong one: on GitHub's
labelled sets, where the lexical ranker finds 98-100% at 5 and the embeddings 53-64%, RRF found
81-85%; on an API whose tasks the lexical ranker reads poorly, the embeddings' first choice lost
to the lexical one as often as it won. Both scores carry the confidence RRF drops:

* the lexical score is a share of the query covered (about 1 when the top tool does everything
  asked, more with name and title hints, near 0 or below when only a word or two matched,
  ``docs/discovery.md``, "Re-rank"): how much the lexical ranking knows about *this* query;
* the cosine is comparable across the tools of one query: its gaps say how far ahead a tool is.

Contract of :func:`fuse`:

* Each tool of either list scores ``lexical score + w · cosine``, where
  ``w = weight · clamp(SURE − best lexical score, W_MIN, W_MAX)``: the better the lexical ranking
  covers the query, the less the embeddings may move it, and when it covered little they decide.
  A tool missing from the lexical list (it shares no word with the query) counts the lowest
  lexical score minus ``ABSENT_GAP``; a tool missing from the semantic list counts that list's
  lowest cosine (it is at most that close).
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

from collections.abc import Sequence

from gateway.discovery.index import SearchHit

__all__ = ["fuse", "SURE", "W_MIN", "W_MAX", "ABSENT_GAP"]

# The lexical top score at which the cosine stops counting (down to W_MIN): a full coverage of the
# query (~1) plus the name/title hints of a clear match; the scores seen run from -0.8 to 1.9.
SURE = 1.8
W_MIN = 0.3  # the cosine's least say: it still orders tools the lexical ranking scores alike
W_MAX = 3.0  # the most: a lexical ranking that matched nothing leaves the order to the cosine
# How far below the lowest lexical candidate a tool that shares no word with the query starts.
ABSENT_GAP = 0.3


def fuse(lexical: Sequence[SearchHit], semantic: Sequence[SearchHit], limit: int,
         weight: float = 1.0) -> list[SearchHit]:
    """The best *limit* tools of both rankings (see the module doc); *weight* scales the cosine's
    say (an endpoint's ``search.embeddings.weight``: 1 as calibrated)."""
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
    best = max(lex.values(), default=0.0)
    w = weight * min(W_MAX, max(W_MIN, SURE - best))
    lex_absent = min(lex.values(), default=0.0) - ABSENT_GAP
    cos_absent = min(cos.values(), default=0.0)
    scores = {name: lex.get(name, lex_absent) + w * cos.get(name, cos_absent) for name in lex.keys() | cos.keys()}
    far = len(lex) + len(cos)
    order = sorted(scores, key=lambda n: (-scores[n], lex_rank.get(n, far), sem_rank.get(n, far), n))
    return [SearchHit(name, scores[name]) for name in order[:max(0, limit)]]

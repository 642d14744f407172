"""The equal-weight reciprocal-rank fusion served before issue 28's redesign, kept for comparison
(``bench/discovery_vectors.py table``'s RRF column): ``1/(60 + lexical rank) + 1/(60 + semantic
rank)``, ties to the better lexical rank, then semantic rank, then name."""

from __future__ import annotations

from collections.abc import Sequence

from gateway.discovery.index import SearchHit


def rrf(lexical: Sequence[SearchHit], semantic: Sequence[SearchHit], limit: int, weight: float = 1.0,
        k: int = 60) -> list[SearchHit]:
    lex_rank: dict[str, int] = {}
    sem_rank: dict[str, int] = {}
    for rank, hit in enumerate(lexical, 1):
        lex_rank.setdefault(hit.name, rank)
    for rank, hit in enumerate(semantic, 1):
        sem_rank.setdefault(hit.name, rank)
    scores = {name: 1.0 / (k + rank) for name, rank in lex_rank.items()}
    for name, rank in sem_rank.items():
        scores[name] = scores.get(name, 0.0) + weight / (k + rank)
    far = len(lex_rank) + len(sem_rank) + 1
    order = sorted(scores, key=lambda n: (-scores[n], lex_rank.get(n, far), sem_rank.get(n, far), n))
    return [SearchHit(name, scores[name]) for name in order[:max(0, limit)]]
